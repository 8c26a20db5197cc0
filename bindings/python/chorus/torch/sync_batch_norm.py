"""SyncBatchNorm: batch normalization whose batch statistics are computed over every rank's
batch. Per channel, each rank sums x and x*x and counts its elements; one allreduce (sum) of
those makes the job-wide mean and variance. The allreduce is differentiable (its backward sums
the gradients of every rank), so autograd gives the exact gradient of the synchronized op."""

import torch
from torch.nn.modules.batchnorm import _BatchNorm

from chorus.torch.mpi_ops import Sum, allreduce, size


class SyncBatchNorm(_BatchNorm):
    """Applies synchronous batch normalization (as horovod.torch.SyncBatchNorm) to inputs of
    shape (N, C, ...). Outside training, or with one rank, it is torch's batch norm."""

    _instances = 0  # names this process' layers in construction order (the same on every rank)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self._chorus_name = "sync_batch_norm.%d" % SyncBatchNorm._instances
        SyncBatchNorm._instances += 1

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("expected at least 2D input (got {}D input)".format(input.dim()))

    def _run_bn(self, input):
        return torch.nn.functional.batch_norm(
            input, self.running_mean, self.running_var, self.weight, self.bias,
            self.training or not self.track_running_stats, self._momentum(), self.eps)

    def _momentum(self):
        if self.momentum is not None:
            return self.momentum
        return 1.0 / float(self.num_batches_tracked) if self.num_batches_tracked is not None else 0.0

    def forward(self, input):
        self._check_input_dim(input)
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
        if not self.training or size() == 1:
            return self._run_bn(input)

        channels = input.shape[1]
        x = input.transpose(0, 1).reshape(channels, -1)
        count = torch.full((1,), float(x.shape[1]), dtype=input.dtype)
        local = torch.cat([x.sum(1), (x * x).sum(1), count])
        total = allreduce(local, op=Sum, name="%s.%s.%d" % (self._chorus_name, str(input.dtype)[6:], channels))
        n = total[-1]
        mean = total[:channels] / n
        var = total[channels:2 * channels] / n - mean * mean

        if self.track_running_stats:
            with torch.no_grad():
                m = self._momentum()
                unbiased = var * (n / (n - 1)) if n > 1 else var
                self.running_mean.mul_(1 - m).add_(mean.detach(), alpha=m)
                self.running_var.mul_(1 - m).add_(unbiased.detach(), alpha=m)

        shape = [1, channels] + [1] * (input.dim() - 2)
        y = (input - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            y = y * self.weight.view(shape) + self.bias.view(shape)
        return y
