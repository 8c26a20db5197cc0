"""DistributedOptimizer's synchronize() and step() (optimizer.py): waiting for every gradient's
operation, then the wrapped optimizer's step, zero_grad() and load_state_dict()."""

import warnings
from contextlib import contextmanager

import torch

from chorus.torch.buckets import Bucket
from chorus.torch.mpi_ops import rank, synchronize


class _SynchronizeAndStep:
    """The synchronize and step methods of _DistributedOptimizer (optimizer.py), which holds
    their state."""

    def _apply(self, p, output, ctx):
        result = self._compression.decompress(output, ctx)
        if result is not p.grad:
            if p.grad.is_sparse:
                p.grad = result
            else:
                p.grad.copy_(result)

    @staticmethod
    def _members(key):
        """The parameters of a handle's key: a bucket's, a group's, or the parameter itself."""
        return key.params if isinstance(key, Bucket) else key if isinstance(key, tuple) else (key,)

    def _receive(self, key, handle, ctx):
        """Waits for `key`'s operation and writes the result into its gradients."""
        if isinstance(key, Bucket):
            handle()  # unpacks into the members' gradients
        elif isinstance(key, tuple):
            for gp, out, gctx in zip(key, synchronize(handle), ctx):
                self._apply(gp, out, gctx)
        else:
            self._apply(key, handle() if callable(handle) else synchronize(handle), ctx)

    def synchronize(self):
        """Waits until every gradient was averaged over all ranks (enqueueing those backward did
        not produce: parameters without a gradient this step still take part)."""
        if not self._included:  # outside the optimizer's process set: nothing to average
            self._synchronized = True
            return
        if self._overlap and self._pending:
            self._finish_pending()  # the last step's updates first
        self._submit_all()
        self._wait_all()

    def _submit_all(self):
        """Submits what backward did not: held gradients, incomplete groups and buckets (zeros
        for missing gradients), parameters without a gradient."""
        if self._end_queued:  # backward ended without its callback (it raised): end it here
            self._end_of_backward()
        self._submit_held()
        # A group whose members did not all produce a gradient is enqueued now, whole (members
        # without one send zeros), under the same name as on a rank where it completed; and
        # every group's count starts again at zero, so the next step's backward enqueues it
        # when all of its gradients are ready, not when leftovers of this step add up.
        for group in self._group_counts:
            if group not in self._handles:
                for p in group:
                    if p.grad is None:
                        p.grad = torch.zeros_like(p)
                    self._handles.pop(p, None)
                self._handles[group] = self._grouped_allreduce_grad_async(group)
            self._group_counts[group] = 0
        # Likewise a bucket not complete on this rank (some members without a gradient, or not
        # at their last backward pass): reduced whole now, zeros for gradients that do not exist.
        for bucket in self._buckets:
            if bucket not in self._handles:
                for p in bucket.params:
                    if p.grad is None:
                        p.grad = torch.zeros_like(p)
                    self._handles.pop(p, None)
                self._held.append(bucket)
            bucket.ready = 0
        self._submit_held()
        done = set()
        for key in self._handles:
            if isinstance(key, Bucket):
                done.update(key.params)
            else:
                done.update(key) if isinstance(key, tuple) else done.add(key)
        for p in self._requires_update - done:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            self._handles[p] = self._allreduce_grad_async(p)
        for key, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                self._handles[key] = self._allreduce_grad_async(key)

    def _wait_all(self):
        """Waits for every submitted operation and writes its result into the gradients."""
        # Every handle is waited for even after one failed (no gradient may be released while
        # the runtime still writes it); the first error is raised once all ended, and the
        # optimizer is left ready for the next backward.
        error = None
        for key, (handle, ctx) in self._handles.items():
            for gp in self._members(key):
                self._allreduce_delay[gp] = self.backward_passes_per_step
            try:
                self._receive(key, handle, ctx)
            except Exception as e:  # noqa: BLE001 - re-raised below, after the others ended
                error = error or e
        self._handles.clear()
        densified, self._densified = self._densified, []
        for p in densified:
            if p.grad is not None and not p.grad.is_sparse:
                p.grad = p.grad.to_sparse()
        if error is not None:
            raise error
        if self._rebuild_pending:
            self._rebuild_buckets()
        self._synchronized = True

    @contextmanager
    def skip_synchronize(self):
        """Inside this context step() does not synchronize: call synchronize() yourself first
        (e.g. to clip the averaged gradients)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._overlap:
            if closure is not None:
                raise ValueError("DistributedOptimizer(overlap=True).step(closure): a closure re-evaluates the "
                                 "model, which needs every update applied; use overlap=False")
            if self._pending:
                self._finish_pending()  # the last step's updates nothing needed (unused parameters)
            # The first step with buckets agrees their order (a collective after every gradient):
            # it runs synchronously, as does a step after an explicit synchronize().
            if self._should_synchronize and not self._synchronized and not self._rebuild_pending:
                self._defer()
                return None
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() context after "
                              "optimizer.synchronize(). This can cause training slowdown. You may want to "
                              "consider using optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        if self._nonfinite:
            # The NaN check in skip mode: every rank got the same ranks for every operation (they
            # were ORed inside the collective), so every rank skips this same step.
            found, self._nonfinite = self._nonfinite, {}
            self.skipped_steps += 1
            if rank() == 0:
                warnings.warn("chorus: optimizer step skipped on every rank: NaN/Inf in %s"
                              % "; ".join("%s on rank(s) %s" % (n, ",".join(map(str, r)))
                                          for n, r in sorted(found.items())))
            return None
        return super(self.__class__, self).step(closure)

    def zero_grad(self, set_to_none=False):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but before "
                                 "optimizer.step() or optimizer.synchronize(). This is prohibited as it can "
                                 "cause a race condition.")
        if self._overlap and self._pending:
            return self._zero_grad_overlapped(set_to_none)
        return super(self.__class__, self).zero_grad(set_to_none)

    def load_state_dict(self, *args, **kwargs):
        if self._overlap and self._pending:
            self._finish_pending()
        self._handles = {}
        self._synchronized = False
        self._should_synchronize = True
        for group in self._group_counts:
            self._group_counts[group] = 0
        for bucket in self._buckets:
            bucket.ready = 0
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        super(self.__class__, self).load_state_dict(*args, **kwargs)

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes
