__version__ = "0.5.18"
SCHEMA_VERSION = "1"
