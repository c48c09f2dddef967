"""Where access ends without a service of ours in the way (the admin's deletes,
cascades, sign-out), record it for open streams (chatsite.tenancy.revocation).
Connected in TenancyConfig.ready(); each receiver is one line of bookkeeping."""
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import is_password_usable
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver

from chatsite.tenancy import revocation
from chatsite.tenancy.models import ApiKey, Membership, Tenant


@receiver(user_logged_out)
def _session_ended(sender, request=None, user=None, **kwargs):
    session_key = getattr(getattr(request, "session", None), "session_key", None)
    if session_key:
        revocation.principal_revoke(kind=revocation.SESSION, ident=revocation.session_fingerprint(session_key),
                                    permanent=True)


@receiver(pre_save, sender=get_user_model())
def _password_changed(sender, instance, update_fields=None, **kwargs):
    """A new password ends every session's streams and tokens (the session that changed it
    signs its new streams in after the change, so they stand)."""
    if instance.pk is None or (update_fields is not None and "password" not in update_fields):
        return
    stored = sender.objects.filter(pk=instance.pk).values_list("password", flat=True).first()
    # A first password (a user just made) ends nothing: no session could have been signed in with none.
    if stored and is_password_usable(stored) and stored != instance.password:
        revocation.principal_revoke(kind=revocation.SESSIONS, ident=instance.pk)


@receiver(post_delete, sender=Membership)
def _membership_removed(sender, instance, **kwargs):
    revocation.principal_revoke(kind=revocation.MEMBER, ident=f"{instance.tenant_id}:{instance.user_id}")


@receiver(post_delete, sender=ApiKey)
def _key_deleted(sender, instance, **kwargs):
    revocation.principal_revoke(kind=revocation.KEY, ident=instance.pk, permanent=True)


@receiver(post_save, sender=Tenant)
@receiver(post_delete, sender=Tenant)
def _tenant_closed(sender, instance, **kwargs):
    if not instance.is_active or kwargs.get("signal") is post_delete:
        revocation.principal_revoke(kind=revocation.TENANT, ident=instance.pk)


@receiver(post_save, sender=get_user_model())
@receiver(post_delete, sender=get_user_model())
def _user_closed(sender, instance, **kwargs):
    if not instance.is_active or kwargs.get("signal") is post_delete:
        revocation.principal_revoke(kind=revocation.USER, ident=instance.pk)


@receiver(post_delete, sender="chats.Chat")
def _chat_deleted(sender, instance, **kwargs):
    revocation.principal_revoke(kind=revocation.CHAT, ident=instance.pk, permanent=True)
