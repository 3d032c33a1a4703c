"""pydantic v2 models of the custom resources (sovereignspec.io/v1alpha1) and external shapes."""
