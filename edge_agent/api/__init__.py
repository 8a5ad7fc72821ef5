"""HTTP layer: the Flask app factory and thin blueprints (reaches services only)."""
