"""The codec's one family of errors: nothing else escapes `mad`."""


class MadError(ValueError):
    """Base of every error the codec raises."""


class MadLengthError(MadError):
    """A buffer that is not the size a layout needs."""


class MadFieldError(MadError):
    """A field value outside the range the layout or the specification allows."""

    def __init__(self, field: str, value, limit: str):
        self.field, self.value, self.limit = field, value, limit
        super().__init__(f"{field}={value!r} out of range: {limit}")


class UnknownAttributeError(MadError):
    """An AttributeID the codec has no layout for."""


class UnknownVersionError(MadError):
    """A BaseVersion/ClassVersion/MgmtClass the codec does not speak."""
