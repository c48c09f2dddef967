"""What every API view needs: the tenant it acts for, and a strict JSON body."""
from functools import cached_property

from chatsite.api.parsers import StrictJSONParser
from chatsite.errors import InvalidInput
from chatsite.tenancy.selectors import tenant_for_request


class TenantScoped:
    # JSON only: form bodies would turn numbers into strings behind the client's back.
    parser_classes = [StrictJSONParser]

    @cached_property
    def tenant(self):
        return tenant_for_request(self.request.user, self.request.auth)

    def body(self) -> dict:
        """The JSON body as a dict, or a 400 naming the problem."""
        data = self.request.data
        if not isinstance(data, dict):
            raise InvalidInput("the request body must be a JSON object, e.g. {\"content\": \"Hello\"}")
        return data
