// Command example creates a job on a jobmesh server, waits for its run to succeed, prints the run's log, and
// shows how an invalid request is refused: a google.rpc.BadRequest whose field violations name the fields.
//
//	go run ./clients/go [HOST:PORT]
//
// The address defaults to $JOBMESH_SERVER, then 127.0.0.1:50051 (`jobmesh dev`); $JOBMESH_TOKEN, when set,
// is sent as a bearer token.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	jobmeshv1 "github.com/jobmesh/jobmesh/gen/go/jobmesh/v1"
)

const message = "hello from Go"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run() error {
	conn, err := grpc.NewClient(serverAddress(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	jobs, search := jobmeshv1.NewJobServiceClient(conn), jobmeshv1.NewSearchServiceClient(conn)

	ctx, cancel := context.WithTimeout(withToken(context.Background()), time.Minute)
	defer cancel()
	created, err := jobs.CreateJob(ctx, &jobmeshv1.CreateJobRequest{Job: echoJob(message)})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	runName := created.GetRun().GetName()
	fmt.Printf("created %s, run %s\n", created.GetJob().GetName(), runName)
	finished, err := waitForRun(ctx, search, created.GetJob().GetName(), runName)
	if err != nil {
		return err
	}
	fmt.Printf("run %s %s\n", runName, stateName(finished.GetState()))
	if finished.GetState() != jobmeshv1.RunState_RUN_STATE_SUCCEEDED {
		return errors.New("the run did not succeed")
	}
	if err := printLog(ctx, search, runName); err != nil {
		return err
	}
	return showInvalidCreate(ctx, jobs)
}

func serverAddress() string {
	if len(os.Args) > 1 {
		return os.Args[1]
	}
	if address := os.Getenv("JOBMESH_SERVER"); address != "" {
		return address
	}
	return "127.0.0.1:50051"
}

// withToken adds `authorization: Bearer $JOBMESH_TOKEN` to every call made with the context.
func withToken(ctx context.Context) context.Context {
	if token := os.Getenv("JOBMESH_TOKEN"); token != "" {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	return ctx
}

func echoJob(text string) *jobmeshv1.Job {
	return &jobmeshv1.Job{
		DisplayName: "Go example",
		Schedule:    &jobmeshv1.Schedule{Kind: &jobmeshv1.Schedule_Immediate_{Immediate: &jobmeshv1.Schedule_Immediate{}}},
		Target: &jobmeshv1.Target{Kind: &jobmeshv1.Target_Command_{
			Command: &jobmeshv1.Target_Command{Argv: []string{"echo", text}},
		}},
	}
}

// waitForRun follows the job's runs until the named one ends, and returns it then.
func waitForRun(ctx context.Context, search jobmeshv1.SearchServiceClient, job, name string) (*jobmeshv1.Run, error) {
	stream, err := search.WatchRuns(ctx, &jobmeshv1.WatchRunsRequest{Parent: job})
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	for {
		changes, err := stream.Recv()
		if err != nil {
			return nil, fmt.Errorf("watch: %w", err)
		}
		for _, run := range changes.GetRuns() {
			if run.GetName() == name && terminal(run.GetState()) {
				return run, nil
			}
		}
	}
}

func terminal(state jobmeshv1.RunState) bool {
	switch state {
	case jobmeshv1.RunState_RUN_STATE_SUCCEEDED, jobmeshv1.RunState_RUN_STATE_FAILED,
		jobmeshv1.RunState_RUN_STATE_CANCELLED, jobmeshv1.RunState_RUN_STATE_TIMED_OUT,
		jobmeshv1.RunState_RUN_STATE_DEAD_LETTERED:
		return true
	}
	return false
}

func stateName(state jobmeshv1.RunState) string {
	return state.String()[len("RUN_STATE_"):]
}

func printLog(ctx context.Context, search jobmeshv1.SearchServiceClient, run string) error {
	stream, err := search.TailRunLogs(ctx, &jobmeshv1.TailRunLogsRequest{Name: run})
	if err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	for {
		batch, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("logs: %w", err)
		}
		for _, line := range batch.GetLines() {
			fmt.Printf("log: %s\n", line.GetText())
		}
	}
}

// showInvalidCreate sends a job without a target and prints the field violations the server answers with.
func showInvalidCreate(ctx context.Context, jobs jobmeshv1.JobServiceClient) error {
	invalid := echoJob(message)
	invalid.Target = nil
	_, err := jobs.CreateJob(ctx, &jobmeshv1.CreateJobRequest{Job: invalid})
	refused, _ := status.FromError(err)
	if refused.Code() != codes.InvalidArgument {
		return fmt.Errorf("an invalid create was answered with %v, not INVALID_ARGUMENT", err)
	}
	fmt.Printf("invalid create refused: %s\n", refused.Code())
	found := false
	for _, detail := range refused.Details() {
		if badRequest, ok := detail.(*errdetails.BadRequest); ok {
			for _, violation := range badRequest.GetFieldViolations() {
				fmt.Printf("violation %s: %s\n", violation.GetField(), violation.GetDescription())
				found = true
			}
		}
	}
	if !found {
		return errors.New("the refusal carried no BadRequest field violations")
	}
	return nil
}
