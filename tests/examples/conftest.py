"""The examples' tests share the dashboard's fixture: one `jobmesh dev` for the module, with its Envoy."""

from tests.web.conftest import dashboard

__all__ = ["dashboard"]
