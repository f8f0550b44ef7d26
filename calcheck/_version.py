__version__ = "0.1.0"
SCHEMA_VERSION = "1"
