"""What a secret looks like, for `memory/redact.py`: tokens known by their shape (`shapes.py`),
values known by the name they are assigned to (`names.py`), and whether a value is plausible
as a credential at all (`values.py`)."""
