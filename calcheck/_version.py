__version__ = "0.2.0"
SCHEMA_VERSION = "1"
