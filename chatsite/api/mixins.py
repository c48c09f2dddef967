"""What every API view needs: the tenant it acts for."""
from functools import cached_property

from chatsite.tenancy.selectors import tenant_for_request


class TenantScoped:
    @cached_property
    def tenant(self):
        return tenant_for_request(self.request.user, self.request.auth)

    def body(self) -> dict:
        """The JSON body as a dict, or a 400 naming the problem."""
        from chatsite.errors import InvalidInput

        data = self.request.data
        if not isinstance(data, dict):
            raise InvalidInput("the request body must be a JSON object")
        return data
