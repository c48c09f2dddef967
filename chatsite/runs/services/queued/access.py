"""Whether a waiting message's sender may still send it when its turn comes: checked as
the door checks a live request's credential, against the credential that queued it
(chatsite.runs.services.queued)."""
from chatsite.chats.models import QueuedMessage
from chatsite.tenancy import revocation
from chatsite.tenancy.revocation import Grant, grant_revoked

ACCESS_ENDED = "its sender no longer has access to this chat"
CREDENTIAL_ENDED = {  # why a message is refused when the credential that queued it ended since
    revocation.KEY: "the API key it was sent with was revoked after it was queued",
    revocation.SESSION: "the session it was sent from was signed out after it was queued",
    revocation.SESSIONS: "its sender's password was changed after it was queued (which signs every session out)",
}


def access_ended(item: QueuedMessage, *, member: bool) -> str | None:
    """Why its sender may no longer send it, checked as the door checks a live request's
    credential: membership (`member`, read with the item: queued.rows.queue_head), and the
    credential that queued it (a key revoked, a session signed out, a password changed
    since; chatsite.tenancy.revocation). None: it may go."""
    if not member:
        return ACCESS_ENDED
    if item.granted_at is None:  # queued before its credential was kept
        return None
    grant = Grant(run_id=0, chat_id=item.chat_id, tenant_id=item.tenant_id, user_id=item.owner_id,
                  credential=item.credential, since=item.granted_at.timestamp())
    if grant.expired():  # older than the revocations kept: none can be ruled out
        return "it waited longer than its sender's access is kept without a check; retry it to send it"
    kind = grant_revoked(grant)
    return None if kind is None else CREDENTIAL_ENDED.get(kind, ACCESS_ENDED)
