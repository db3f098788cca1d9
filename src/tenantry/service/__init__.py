"""The service layer: the runtime every op receives and the seams between concepts.

``runtime.Runtime`` holds the daemon's parts; ``seams`` names, as small
Protocols, every call one concept makes into another, so that the type checker
sees each of them. Concepts import from here; nothing here imports a concept.
"""
