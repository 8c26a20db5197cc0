"""A Horovod PyTorch training script, switched to Chorus by its import line only:

    chorusrun -np 2 -- python3 examples/pytorch/train.py --epochs 3

It trains a small MLP classifier on a synthetic data set (the same on every rank, sharded with
DistributedSampler), in the usual Horovod way: scale the learning rate by the number of ranks,
broadcast the initial parameters and optimizer state from rank 0, wrap the optimizer in
DistributedOptimizer, average the metrics with allreduce. Exits 1 if the loss did not drop."""

import argparse
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import chorus.torch as hvd


def parse_args():
    p = argparse.ArgumentParser(description="chorus.torch (Horovod API) example: synthetic MLP")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.05, help="per rank; scaled by hvd.size()")
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--fp16-allreduce", action="store_true", help="compress gradients to float16")
    p.add_argument("--sync-bn", action="store_true", help="use hvd.SyncBatchNorm")
    p.add_argument("--buckets-follow-fusion", action="store_true",
                   help="each epoch, cut the gradient buckets at a quarter of the fusion threshold in force "
                        "(which CHORUS_AUTOTUNE=1 moves)")
    return p.parse_args()


class Net(nn.Module):
    def __init__(self, sync_bn):
        super().__init__()
        self.fc1 = nn.Linear(32, 128)
        self.bn = hvd.SyncBatchNorm(128) if sync_bn else nn.BatchNorm1d(128)
        self.fc2 = nn.Linear(128, 64)
        self.fc3 = nn.Linear(64, 8)

    def forward(self, x):
        x = F.relu(self.bn(self.fc1(x)))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def synthetic_data(samples, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, 32, generator=g)
    teacher = torch.randn(32, 8, generator=g)
    y = (x @ teacher + 0.1 * torch.randn(samples, 8, generator=g)).argmax(1)
    return TensorDataset(x, y)


def metric_average(value, name):
    return hvd.allreduce(torch.tensor(value), name=name).item()


def main():
    args = parse_args()
    hvd.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    dataset = synthetic_data(args.samples, args.seed)
    sampler = DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank())
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

    model = Net(args.sync_bn)
    optimizer = optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression, op=hvd.Average)

    losses = []
    for epoch in range(args.epochs):
        model.train()
        sampler.set_epoch(epoch)
        if args.buckets_follow_fusion:
            # Between steps, on every rank (collective; rank 0's value is used on all).
            optimizer.set_bucket_bytes(hvd.settings()["fusion_threshold"] // 4)
        total, correct, loss_sum, batches = 0, 0, 0.0, 0
        for x, y in loader:
            optimizer.zero_grad()
            out = model(x)
            loss = F.cross_entropy(out, y)
            loss.backward()
            optimizer.step()
            loss_sum += loss.item()
            batches += 1
            correct += (out.argmax(1) == y).sum().item()
            total += len(y)
        avg_loss = metric_average(loss_sum / batches, "avg_loss")
        accuracy = metric_average(correct / total, "avg_accuracy")
        losses.append(avg_loss)
        if hvd.rank() == 0:
            print("epoch %d: loss %.4f accuracy %.3f (%d ranks)" % (epoch, avg_loss, accuracy, hvd.size()),
                  flush=True)

    # Every rank ends with the same weights.
    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    same = torch.equal(hvd.broadcast(weights, root_rank=0, name="final_weights"), weights)
    hvd.shutdown()
    if not same:
        print("rank weights differ after training", file=sys.stderr)
        return 1
    if len(losses) > 1 and not losses[-1] < losses[0]:
        print("loss did not drop: %s" % losses, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
