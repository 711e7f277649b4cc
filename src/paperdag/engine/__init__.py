"""The paperdag engine: one pipeline declaration, rendered for DVC, run by Prefect, tracked in MLflow.

It knows no method: stages/<pipeline>.py is where a method and the engine meet.
"""
