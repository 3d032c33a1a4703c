"""Kubernetes adapters: snapshot building and server-side-apply writes."""
