"""The admission server: the Flask app, TLS with reloading certificates, gunicorn's configuration and
worker, readiness, metrics and the cloud-map reloader."""
