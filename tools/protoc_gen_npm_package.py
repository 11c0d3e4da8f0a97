"""A protoc plugin that writes the `package.json` of the generated TypeScript, so that `gen/ts` is an npm
package (`@jobmesh/api`) that buf alone writes, like the rest of `gen/`.

Its options (buf.gen.yaml `opt`) name the package and pin what the generated code imports:
`name=NAME`, `version=VERSION`, `dependency=PACKAGE@VERSION` and `peer=PACKAGE@VERSION` (repeatable).
"""

import json
import sys

from google.protobuf.compiler import plugin_pb2

DESCRIPTION = "The jobmesh.v1 API for TypeScript and JavaScript: messages and service descriptors."


def split_pin(pin: str) -> tuple[str, str]:
    """`@scope/name@1.2.3` into its name and version."""
    name, _, version = pin.rpartition("@")
    return name, version


def package_json(parameter: str) -> str:
    options: dict[str, list[str]] = {}
    for option in filter(None, parameter.split(",")):
        key, _, value = option.partition("=")
        options.setdefault(key, []).append(value)
    package = {
        "name": options["name"][0],
        "version": options["version"][0],
        "description": DESCRIPTION,
        "license": "Apache-2.0",
        "type": "module",
        "sideEffects": False,
        # `@jobmesh/api/jobmesh/v1/job_service_pb.js`: the same paths as the .proto files.
        "exports": {"./*.js": {"types": "./*.d.ts", "default": "./*.js"}},
        "dependencies": dict(map(split_pin, options.get("dependency", []))),
        "peerDependencies": dict(map(split_pin, options.get("peer", []))),
    }
    return json.dumps(package, indent=2) + "\n"


def main() -> int:
    request = plugin_pb2.CodeGeneratorRequest.FromString(sys.stdin.buffer.read())
    response = plugin_pb2.CodeGeneratorResponse(
        supported_features=plugin_pb2.CodeGeneratorResponse.FEATURE_PROTO3_OPTIONAL
    )
    response.file.add(name="package.json", content=package_json(request.parameter))
    sys.stdout.buffer.write(response.SerializeToString())
    return 0


if __name__ == "__main__":
    sys.exit(main())
