"""kopf handlers: the AdmissionCheck controller."""
