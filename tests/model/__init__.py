"""Model-based interleaving tests of the clarification lifecycle."""
