"""Forms of the server-rendered pages."""
from django import forms
from django.contrib.auth.forms import AuthenticationForm

from chatsite.chats.services import MAX_TITLE_CHARS


class LoginForm(AuthenticationForm):
    """Django's sign-in form, with the attributes password managers and phones expect."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["username"].widget.attrs.update(
            {"autocomplete": "username", "autocapitalize": "none", "spellcheck": "false", "autofocus": True})
        self.fields["password"].widget.attrs.update({"autocomplete": "current-password"})


class RenameForm(forms.Form):
    title = forms.CharField(max_length=MAX_TITLE_CHARS, required=False, strip=True)
