"""roofline: a closed-form, calibrated roofline model of distributed LLM training time.

>>> from roofline import Model, Plan, predict, hardware
>>> p = predict(Model(n_layers=2, d_model=256, n_heads=4, vocab=1000, seq_len=128), Plan(), hardware.load("a100-sxm4-80gb"))
>>> p.step_time.to("ms").units
<Unit('millisecond')>
"""
from .spec import hardware, models
from .spec.config import Model, Plan
from .base.errors import InputError
from .model.predict import Prediction, one_batch_time, predict, predict_config
from .spec.resolve import Spec, resolve


def __getattr__(name):   # lazy: the config-file API and the plan search import more modules
    if name == "load_config":
        from .spec.configfile import load_config
        return load_config
    if name == "search":
        import importlib
        return importlib.import_module("roofline.views.search")
    raise AttributeError(name)


__all__ = ["Model", "Plan", "Prediction", "predict", "resolve", "Spec", "predict_config", "one_batch_time", "load_config", "hardware",
           "models", "InputError"]
