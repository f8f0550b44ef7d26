__version__ = "0.2.1"
SCHEMA_VERSION = "1"
