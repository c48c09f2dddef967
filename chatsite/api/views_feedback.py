"""Feedback on a reply, kept with its run."""
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from chatsite.api import stated
from chatsite.api.mixins import TenantScoped
from chatsite.api.openapi import READ_ERRORS, WRITE_ERRORS, errors
from chatsite.errors import NotFound
from chatsite.runs.models import ReplyFeedback
from chatsite.runs.selectors import feedback_for, run_get
from chatsite.runs.services.feedback import MAX_COMMENT_CHARS, feedback_give, feedback_withdraw

TAGS = ["runs"]


class FeedbackSerializer(serializers.ModelSerializer):
    run = serializers.IntegerField(source="run_id", help_text="The run whose reply it is about.")

    class Meta:
        model = ReplyFeedback
        fields = ["run", "rating", "comment", "created_at", "updated_at"]
        extra_kwargs = {"rating": {"help_text": "up or down."},
                        "comment": {"help_text": "What the person added in words; may be empty."},
                        "created_at": {"help_text": "When it was first given."},
                        "updated_at": {"help_text": "When it was last given or changed."}}


class FeedbackRequest(serializers.Serializer):
    rating = serializers.ChoiceField(choices=ReplyFeedback.Rating.values, help_text="up or down.")
    comment = stated.text(required=False, allow_null=True, max_length=MAX_COMMENT_CHARS,
                          help_text=f"Optional, at most {MAX_COMMENT_CHARS} characters; no NUL bytes.")


class FeedbackView(TenantScoped, APIView):
    def _run(self, run_id):
        return run_get(tenant=self.tenant, user=self.request.user, run_id=run_id)

    @extend_schema(operation_id="runs_feedback_retrieve", summary="Your feedback on a run's reply", tags=TAGS,
                   responses={200: FeedbackSerializer, **errors(*READ_ERRORS)})
    def get(self, request, run_id: int):
        feedback = feedback_for(run_ids=[self._run(run_id).pk])
        if not feedback:
            raise NotFound("no feedback on this reply yet")
        return Response(FeedbackSerializer(next(iter(feedback.values()))).data)

    @extend_schema(operation_id="runs_feedback_give", summary="Rate a run's reply: thumbs up or down, a comment",
                   description="Given again, it replaces the earlier feedback. Refused (400) while the reply "
                               "is still being written.", tags=TAGS, request=FeedbackRequest,
                   examples=[OpenApiExample("Thumbs down", request_only=True,
                                            value={"rating": "down", "comment": "It named the wrong capital."})],
                   responses={200: FeedbackSerializer, **errors(*WRITE_ERRORS, rules=(
                       "`run` whose reply is still being written."))})
    def put(self, request, run_id: int):
        data = self.body()
        feedback = feedback_give(run=self._run(run_id), user=request.user, rating=data.get("rating"),
                                 comment=data.get("comment", ""))
        return Response(FeedbackSerializer(feedback).data)

    @extend_schema(operation_id="runs_feedback_withdraw", summary="Withdraw your feedback on a run's reply",
                   tags=TAGS, responses={204: None, **errors(*READ_ERRORS)})
    def delete(self, request, run_id: int):
        feedback_withdraw(run=self._run(run_id))
        return Response(status=status.HTTP_204_NO_CONTENT)
