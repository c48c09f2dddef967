"""A serializer's stock DRF output, its fields built once per serializer class.

Why: a ModelSerializer builds its fields (deep copies, model introspection) for every
instance, and a message POST answers with four of them; the fields come from the
serializer's own declaration (Meta.fields and the declared fields), so they are built
once for the class and read as `Serializer.to_representation` reads them."""
from rest_framework.fields import SerializerMethodField, SkipField
from rest_framework.relations import PKOnlyObject
from rest_framework.serializers import BaseSerializer

_READABLE: dict[type, tuple] = {}  # serializer class -> ((name, method name or None, field), ...)


def readable_fields(cls: type) -> tuple:
    """The class's readable fields, bound once to an instance made for the purpose."""
    found = _READABLE.get(cls)
    if found is None:
        found = []
        for field in cls().fields.values():
            if field.write_only:
                continue
            if isinstance(field, BaseSerializer):  # it would read the template's context, not the caller's
                raise TypeError(f"{cls.__name__}.{field.field_name}: a nested serializer; use a "
                                "SerializerMethodField that serializes it")
            method = field.method_name if isinstance(field, SerializerMethodField) else None
            found.append((field.field_name, method, field))
        found = _READABLE[cls] = tuple(found)
    return found


class FieldsBuiltOnce:
    """Mix into a serializer (before it) whose fields depend on its class alone: the
    same dict DRF builds, with SerializerMethodFields called on this instance (its context)."""

    def to_representation(self, instance):
        out = {}
        for name, method, field in readable_fields(type(self)):
            if method is not None:
                out[name] = getattr(self, method)(instance)
                continue
            try:
                attribute = field.get_attribute(instance)
            except SkipField:
                continue
            value = attribute.pk if isinstance(attribute, PKOnlyObject) else attribute
            out[name] = None if value is None else field.to_representation(attribute)
        return out
