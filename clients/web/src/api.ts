// The app's only back end: the public gRPC API over gRPC-Web (binary), through Envoy on the page's origin.
import { createClient } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { JobService } from "@gen/jobmesh/v1/job_service_pb.js";
import { SearchService } from "@gen/jobmesh/v1/search_service_pb.js";
import { readToken, tokenInterceptor } from "./token";

const baseUrl = (import.meta.env.VITE_API_URL as string | undefined) ?? window.location.origin;

const transport = createGrpcWebTransport({
  baseUrl,
  useBinaryFormat: true,
  interceptors: [tokenInterceptor(readToken)],
});

export const jobService = createClient(JobService, transport);
export const searchService = createClient(SearchService, transport);
