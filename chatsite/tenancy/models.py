"""Tenants, who belongs to them, the API keys members use, and access that ended."""
from django.conf import settings
from django.db import models


class Tenant(models.Model):
    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=50, unique=True)
    is_active = models.BooleanField(default=True)
    # Pools this tenant may use; empty means every enabled pool.
    allowed_pools = models.ManyToManyField("pools.ModelPool", blank=True, related_name="tenants")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        MEMBER = "member"
        ADMIN = "admin"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "user"], name="one_membership_per_tenant")]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant}"


class ApiKey(models.Model):
    """A bearer key. Only a SHA-256 of the secret is stored; `prefix` finds the row."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class UserPreferences(models.Model):
    """A person's own settings, in every tenant they belong to (the settings page)."""

    class Theme(models.TextChoices):
        SYSTEM = "system", "Same as the system"
        LIGHT = "light", "Light"
        DARK = "dark", "Dark"

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True,
                                related_name="preferences")
    theme = models.CharField(max_length=6, choices=Theme.choices, default=Theme.SYSTEM)
    default_instructions = models.TextField(blank=True, help_text="The system prompt a new chat starts with.")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.user}'s preferences"


class Revocation(models.Model):
    """Access through a principal ended (chatsite.tenancy.revocation): the durable record.
    Redis holds the markers open streams check; after Redis lost them (a restart without
    persistence) they are written again from these rows, before any stream is let through."""

    kind = models.CharField(max_length=10)
    ident = models.CharField(max_length=80)
    revoked_at = models.DateTimeField()
    permanent = models.BooleanField(default=False, help_text="Never granted again (keys, sessions, chats).")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "ident"], name="one_revocation_per_principal")]
        indexes = [models.Index(fields=["revoked_at"])]

    def __str__(self) -> str:
        return f"{self.kind}:{self.ident} at {self.revoked_at:%Y-%m-%d %H:%M:%S}"
