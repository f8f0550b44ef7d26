__version__ = "0.5.11"
SCHEMA_VERSION = "1"
