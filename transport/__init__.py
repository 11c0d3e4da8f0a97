"""How a process or an SDK dials the jobmesh server: the transport security of its gRPC channels."""
