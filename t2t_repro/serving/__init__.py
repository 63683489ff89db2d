"""Serving a trained model outside training: the SavedModel, the CTranslate2 conversion and the
LiteRT export."""

# Weight types of a CTranslate2 export (`ctranslate2.export_ctranslate2`, CTranslate2's own
# quantization names); here so that the export command defines its flags without TensorFlow.
QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16",
                 "bfloat16", "float32")
# Weight types of a LiteRT export (`litert.export_litert`; "none": float32).
LITERT_QUANTIZATIONS = ("none", "float16", "dynamic_range")


def check_export_dir(export_dir, overwrite):
  """Refuses a non-empty export folder unless `overwrite` (which replaces it whole: the exports
  build a staged folder and rename it, `model_dir.ModelDir.write_dir`).

  Raises:
    errors.UsageError: `export_dir` holds files and `overwrite` is False.
  """
  from t2t_repro import errors  # pylint: disable=import-outside-toplevel
  from t2t_repro.model_dir import ModelDir  # pylint: disable=import-outside-toplevel
  folder = ModelDir(export_dir)
  if not overwrite and folder.exists() and folder.glob("*"):
    raise errors.UsageError(f"`export_dir`={export_dir} is not empty; give `overwrite` to "
                            "replace it, or a new folder")
