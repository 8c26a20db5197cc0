"""DistributedOptimizer(overlap=True) (optimizer.py): step() returns without waiting for every
gradient; each parameter's update is applied when something first needs it, so the tail of
the communication overlaps the next forward pass:

- a forward pre-hook (every module, registered once per optimizer) finishes the pending
  updates of the module's own parameters before the module runs: their bucket's reduction
  is waited for, then the wrapped optimizer steps on that bucket's parameters alone;
- a gradient hook on each parameter finishes its update before backward adds to its gradient
  (a parameter used outside its module's forward, e.g. tied weights);
- the next step(), synchronize(), the optimizer's state_dict() and a module's state_dict()
  finish every pending update first.

The update of a parameter reads only its own gradient and state with the optimizers allowed
here (SGD, Adam, AdamW and the other per-parameter ones of torch.optim), so stepping bucket by
bucket gives the parameters of one step over all of them, bit for bit. What needs every
gradient at once is refused with a clear error (optimizers outside that list, a closure, the
NaN check's skip mode, explicit groups, gradient accumulation)."""

import weakref

import torch
import torch.nn.modules.module as _module


# torch.optim classes whose step updates each parameter from its own gradient and state alone.
_PER_PARAMETER = tuple(getattr(torch.optim, n) for n in ("SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax",
                                                           "RMSprop", "Rprop", "NAdam", "RAdam", "ASGD")
                       if hasattr(torch.optim, n))


def overlap_refusal(optimizer_class, groups, backward_passes_per_step, nan_check):
    """Why overlap=True cannot give the synchronous result with these arguments, or None."""
    if not issubclass(optimizer_class, _PER_PARAMETER):
        return ("overlap=True updates parameters bucket by bucket, which only per-parameter optimizers "
                "(%s) allow; %s may need every gradient at once: use overlap=False"
                % (", ".join(c.__name__ for c in _PER_PARAMETER), optimizer_class.__name__))
    if groups:
        return "overlap=True does not take explicit groups / num_groups: use buckets (CHORUS_BUCKET_BYTES)"
    if backward_passes_per_step != 1:
        return "overlap=True needs backward_passes_per_step=1 (accumulate with overlap=False)"
    if nan_check == "skip":
        return "overlap=True cannot skip a step for a NaN/Inf found in any gradient (nan_check='skip')"
    return None


class _Overlap:
    """The overlap methods of _DistributedOptimizer (optimizer.py), which holds their state:
    self._overlap (on or off), self._pending (key -> (handle, ctx): a bucket, a parameter),
    self._pending_key (parameter -> its key), self._zero_pending (zero_grad's set_to_none for
    parameters updated later, or None)."""

    def _start_overlap(self):
        self._pending = {}
        self._pending_key = {}
        self._zero_pending = None
        me = weakref.ref(self)

        def before_forward(module, inputs):
            opt = me()
            if opt is None:
                return
            if id(module) not in opt._state_hooked and module._parameters:
                opt._hook_state_dict(module)
            if opt._pending:
                opt._finish_pending([p for p in module._parameters.values() if p is not None])

        weakref.finalize(self, _module.register_module_forward_pre_hook(before_forward).remove)
        self._state_hooked = set()
        for p in self._requires_update:
            p.register_hook(self._before_accumulate(p))

    def _before_accumulate(self, p):
        me = weakref.ref(self)

        def hook(grad):
            opt = me()
            if opt is not None and p in opt._pending_key:
                opt._finish_pending([p])
            return grad
        return hook

    def _defer(self):
        """step() with overlap: everything submitted, nothing waited for; the updates wait in
        self._pending until something needs them, with the hyperparameters of this step (an LR
        scheduler may change them before they are applied)."""
        self._submit_all()
        self._pending_settings = [{k: v for k, v in g.items() if k != "params"} for g in self.param_groups]
        self._pending = dict(self._handles)
        self._handles.clear()
        for key in self._pending:
            for p in self._members(key):
                self._pending_key[p] = key
                self._allreduce_delay[p] = self.backward_passes_per_step

    def _finish_pending(self, params=None):
        """Waits for and applies the pending updates of `params` (all of them: None). When one
        operation failed, every other pending one is still waited for (the runtime may be writing
        its gradients) and dropped without its update, and the first error is raised: the
        optimizer is then ready for the next backward, as after a failed synchronous step."""
        keys = list(self._pending) if params is None else \
            list(dict.fromkeys(self._pending_key[p] for p in params if p in self._pending_key))
        for key in keys:
            handle, ctx = self._pending.pop(key)
            members = self._members(key)
            for p in members:
                del self._pending_key[p]
            try:
                self._receive(key, handle, ctx)
            except Exception:
                self._drop_pending(members)
                raise
            self._step_on(members)

    def _drop_pending(self, failed):
        """After a failed update: waits for every other pending operation, applies none of them,
        and leaves zero_grad's effect on every member of them and of `failed`."""
        dropped = list(failed)
        for key, (handle, ctx) in list(self._pending.items()):
            try:
                self._receive(key, handle, ctx)
            except Exception:  # noqa: BLE001 - the first error is the one raised
                pass
            dropped.extend(self._members(key))
        self._pending.clear()
        self._pending_key.clear()
        self._zero_after(dropped)

    def _step_on(self, members):
        """The wrapped optimizer's step on `members` alone, then zero_grad's effect on them if it
        was asked for while their update was pending."""
        wanted = {id(p) for p in members}
        kept = [dict(g) for g in self.param_groups]
        try:
            for g, settings in zip(self.param_groups, self._pending_settings):
                g.update(settings)
                g["params"] = [p for p in g["params"] if id(p) in wanted]
            super(self.__class__, self).step()
        finally:
            for g, was in zip(self.param_groups, kept):
                g.clear()
                g.update(was)
        densified = [p for p in self._densified if id(p) in wanted]
        for p in densified:
            self._densified.remove(p)
            if p.grad is not None and not p.grad.is_sparse:
                p.grad = p.grad.to_sparse()
        self._zero_after(members)

    def _zero_after(self, members):
        """zero_grad's effect on `members`, if it was asked for while their update was pending."""
        if self._zero_pending is not None:
            for p in members:
                if p.grad is None:
                    continue
                if self._zero_pending:
                    p.grad = None
                else:
                    p.grad.detach_()
                    p.grad.zero_()
            if not self._pending:
                self._zero_pending = None

    def _zero_grad_overlapped(self, set_to_none):
        """zero_grad() while updates are pending: the others now, the pending ones right after
        their update."""
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None or p in self._pending_key:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.detach_()
                    p.grad.zero_()
        self._zero_pending = set_to_none

    def _hook_state_dict(self, module):
        """The module's state_dict() finishes every pending update (a checkpoint holds the
        synchronous step's parameters: the updates are in place, and the state's tensors share
        the parameters' storage). Hooked the first time the module runs forward."""
        me = weakref.ref(self)
        self._state_hooked.add(id(module))

        def after(mod, state, prefix, local_metadata):
            opt = me()
            if opt is not None and opt._pending:
                opt._finish_pending()
        module._register_state_dict_hook(after)

    def state_dict(self):
        if getattr(self, "_pending", None):
            self._finish_pending()
        return super(self.__class__, self).state_dict()
