"""Serving a trained model outside training: the SavedModel and the CTranslate2 conversion."""

# Weight types of a CTranslate2 export (`ctranslate2.export_ctranslate2`, CTranslate2's own
# quantization names); here so that the export command defines its flags without TensorFlow.
QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16",
                 "bfloat16", "float32")
