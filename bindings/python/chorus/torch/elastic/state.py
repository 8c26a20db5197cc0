"""hvd.elastic.TorchState: an ObjectState whose models, optimizers, LR schedulers and elastic
samplers are saved with deep copies of their state_dict, restored with load_state_dict and
synced from rank 0 with broadcast_parameters / broadcast_optimizer_state / broadcast_object."""

import copy

import torch

from chorus import _chorus_torch as _lib
from chorus.common.elastic import Keeper, ObjectState
from chorus.torch.basics import Max, rank
from chorus.torch.elastic.sampler import ElasticSampler
from chorus.torch.functions import broadcast_object, broadcast_optimizer_state, broadcast_parameters


def _current_round():
    r = _lib.elastic_round()
    return None if r < 0 else r


def _latest_round():
    r = _lib.elastic_latest_round()
    return None if r < 0 else r


def _agree_max(value):
    from chorus.torch.mpi_ops import allreduce
    t = allreduce(torch.tensor([int(value)], dtype=torch.int64), op=Max, name="chorus.elastic.host_updates")
    return int(t.item())


class StateHandler(Keeper):
    """How TorchState keeps one object: save(), restore(), sync(); set_value() replaces it."""

    def __init__(self, value):
        self.value = value

    def set_value(self, value):
        self.value = value
        self.save()


class _StateDictHandler(StateHandler):
    """Anything with state_dict()/load_state_dict(): a deep copy is the saved state."""

    def __init__(self, value):
        super().__init__(value)
        self._saved = copy.deepcopy(self.value.state_dict())

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)

    def sync(self):
        self.value.load_state_dict(broadcast_object(self.value.state_dict(), name="chorus.elastic.state"))


class ModelStateHandler(_StateDictHandler):
    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class OptimizerStateHandler(_StateDictHandler):
    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)


class LRSchedulerStateHandler(_StateDictHandler):
    pass


class SamplerStateHandler(_StateDictHandler):
    pass


_lr_scheduler_base = getattr(torch.optim.lr_scheduler, "LRScheduler", None) or torch.optim.lr_scheduler._LRScheduler
_handler_registry = [
    (torch.nn.Module, ModelStateHandler),
    (torch.optim.Optimizer, OptimizerStateHandler),
    (_lr_scheduler_base, LRSchedulerStateHandler),
    (ElasticSampler, SamplerStateHandler),
]


def get_handler_registry():
    return _handler_registry


def set_handler_registry(registry):
    global _handler_registry
    _handler_registry = registry


def _split_handlers(kwargs):
    handlers, plain = {}, {}
    for name, value in kwargs.items():
        for kind, handler_cls in _handler_registry:
            if isinstance(value, kind):
                handlers[name] = handler_cls(value)
                break
        else:
            plain[name] = value
    return handlers, plain


class TorchState(ObjectState):
    """The state of a PyTorch training process: `model`, `optimizer` and any keyword arguments,
    exposed as attributes. Models, optimizers, LR schedulers and ElasticSamplers are kept through
    their state_dict; anything else as a plain object (broadcast from rank 0 by sync())."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(model=model, optimizer=optimizer)
        self._handlers, kwargs = _split_handlers(kwargs)
        for name, handler in self._handlers.items():
            setattr(self, name, handler.value)
        super(TorchState, self).__init__(bcast_object=broadcast_object, get_rank=rank, _latest_round=_latest_round,
                                         _current_round=_current_round, _agree_max=_agree_max, **kwargs)

    def _each_handler(self, method):
        for handler in self._handlers.values():
            getattr(handler, method)()

    def save(self):
        self._each_handler("save")
        super(TorchState, self).save()

    def restore(self):
        self._each_handler("restore")
        super(TorchState, self).restore()

    def sync(self):
        self._each_handler("sync")
        super(TorchState, self).sync()

    def reset(self):
        # A sampler splits the rest of its epoch among the workers of the new round.
        for handler in self._handlers.values():
            if isinstance(handler.value, ElasticSampler):
                handler.value.reset()

    def __setattr__(self, name, value):
        if name != "_handlers" and name in getattr(self, "_handlers", {}) and hasattr(self, name):
            self._handlers[name].set_value(value)
        super().__setattr__(name, value)
