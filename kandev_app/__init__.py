"""The Reflex app package (``rxconfig.app_name``)."""
