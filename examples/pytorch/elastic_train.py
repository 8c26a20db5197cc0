"""Elastic training with chorus.torch, written as for horovod.torch (hvd.elastic): a small
regression model on a synthetic data set, an ElasticSampler, a TorchState committed every few
batches. Run it so that ranks may die and the others carry on (on one host, --no-blacklist:
chorusrun, as horovodrun, would blacklist the host of a failed rank and end the job):

    chorusrun -np 3 --min-np 2 --max-np 3 --no-blacklist -- python3 examples/pytorch/elastic_train.py

Each rank prints one line per event (start of a round of training, commit, end), which
tests/python/elastic_kill_test.py reads:
    start step=S epoch=E size=N rank=R pid=P
    commit step=S epoch=E
    final step=S sha=<digest of the parameters>"""

import argparse
import hashlib
import os
import sys
import time

import torch

import chorus.torch as hvd


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--samples", type=int, default=1536, help="samples in the data set")
    p.add_argument("--batch-size", type=int, default=16, help="per rank")
    p.add_argument("--batches-per-commit", type=int, default=4)
    p.add_argument("--batch-sleep", type=float, default=0.0, help="seconds of pretend work per batch")
    p.add_argument("--lr", type=float, default=0.01)
    return p.parse_args()


def say(text):
    print(text, flush=True)


def digest(model):
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def main():
    args = parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    hvd.init()

    # The same data on every rank (seeded); the sampler gives each rank its share.
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(args.samples, 16, generator=gen)
    y = x @ torch.randn(16, 1, generator=gen) + 0.1 * torch.randn(args.samples, 1, generator=gen)
    dataset = torch.utils.data.TensorDataset(x, y)

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=2)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

    state = hvd.elastic.TorchState(model=model, optimizer=optimizer, sampler=sampler, epoch=0, step=0)

    def on_reset():
        # The learning rate follows the number of ranks, as in Horovod's examples.
        for group in optimizer.param_groups:
            group["lr"] = args.lr * hvd.size()

    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state):
        say("start step=%d epoch=%d size=%d rank=%d pid=%d" % (state.step, state.epoch, hvd.size(), hvd.rank(),
                                                             os.getpid()))
        while state.epoch < args.epochs:
            for batch_idx, (data, target) in enumerate(loader):
                optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(model(data), target)
                loss.backward()
                optimizer.step()
                if args.batch_sleep:
                    time.sleep(args.batch_sleep)
                state.step += 1
                state.sampler.record_batch(batch_idx, args.batch_size)
                if state.step % args.batches_per_commit == 0:
                    state.commit()
                    say("commit step=%d epoch=%d" % (state.step, state.epoch))
            state.epoch += 1
            state.sampler.set_epoch(state.epoch)
            state.commit()
            say("commit step=%d epoch=%d" % (state.step, state.epoch))
        return state.step

    steps = train(state)
    say("final step=%d sha=%s" % (steps, digest(model)))
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
