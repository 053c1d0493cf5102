"""The HTTP surface (FastAPI), mounted into the Reflex app through ``api_transformer``."""
