"""The servable of a version folder, by the kind of export it holds (`load_warm`).

The kind is the model_platform of `versions.PLATFORMS` whose file the folder holds: a
SavedModel (`servable.Servable`), a CTranslate2 export (`ct2_servable.Ct2Servable`) or a
LiteRT export (`litert_servable.LiteRtServable`). This
module stands above the servables so that none of them imports another to pick one.
"""

from t2t_repro import errors
from t2t_repro.serving import versions


def load_warm(name, version, path, options=None, model_platform=""):
  """A servable of the version at `path` (its kind: `versions.platform`), after one sentence
  through serving_default (the first call's set-up, done before it takes requests).

  Args:
    name: the model name of the API's URLs (--model_name).
    version: its version (int).
    path: the version's folder.
    options: the server's `config.BatchingOptions` (its max_batch_tokens is the model's
      decoding budget too), or None: the export's own.
    model_platform: "" (the folder's file says), or a key of `versions.PLATFORMS` the
      folder must hold.

  Raises:
    errors.DataError: not a loadable export of this project, or not of `model_platform`.
  """
  found = versions.platform(path)
  if model_platform and found != model_platform:
    raise errors.DataError(f"`model_base_path` {path}: model_platform {model_platform} wants "
                           f"{versions.PLATFORMS[model_platform]} in each version folder")
  if found == "ctranslate2":
    from t2t_repro.serving import ct2_servable  # pylint: disable=import-outside-toplevel
    servable = ct2_servable.Ct2Servable(name, version, path, options)
  elif found == "litert":
    from t2t_repro.serving import litert_servable  # pylint: disable=import-outside-toplevel
    servable = litert_servable.LiteRtServable(name, version, path, options)
  else:
    from t2t_repro.serving import servable as servable_lib  # pylint: disable=import-outside-toplevel
    servable = servable_lib.Servable(name, version, path, options and options.max_batch_tokens)
  servable.run("serving_default", {"sentences": ["Hello."]})
  return servable
