__version__ = "0.5.9"
SCHEMA_VERSION = "1"
