"""Serving a trained model outside training: the SavedModel and the CTranslate2 conversion."""
