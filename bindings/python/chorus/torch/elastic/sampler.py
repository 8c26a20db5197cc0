"""hvd.elastic.ElasticSampler: a DistributedSampler whose partition follows resets. It counts the
samples the job processed this epoch (record_batch); after a reset the rest of the epoch is
split among the new set of workers, so no sample is skipped or repeated past the last commit."""

import math
import random

import torch.utils.data

from chorus.torch.basics import rank, size


class ElasticSampler(torch.utils.data.Sampler):
    """Partitions `dataset` over the ranks of the current round; repartitions on reset.

    Use it as in Horovod: hand it to the TorchState (its state is saved, restored and synced
    with the model's), call record_batch(batch_idx, batch_size) after each batch and
    set_epoch(epoch) at the end of each epoch. `shuffle`: a permutation seeded by seed + epoch,
    the same on every rank; `seed` must be the same on every rank."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0  # samples of this epoch the whole job has processed
        self.num_replicas = 0
        self.rank = 0
        self.remaining_indices = []
        self.num_samples = 0
        self.total_size = 0
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch `epoch` (call it at the end of an epoch): clears the processed count."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Records that every rank processed one batch of `batch_size` samples."""
        self.processed_num += batch_size * self.num_replicas

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def reset(self):
        """Takes this round's size() and rank() and splits what is left of the epoch."""
        self.num_replicas = size()
        self.rank = rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = order[self.processed_num:]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        # Pad with the first indices so every rank gets num_samples, then take every
        # num_replicas-th index starting at this rank.
        padded = list(self.remaining_indices)
        while padded and len(padded) < self.total_size:
            padded += self.remaining_indices[:self.total_size - len(padded)]
        mine = padded[self.rank:self.total_size:self.num_replicas]
        assert len(mine) == self.num_samples, (len(mine), self.num_samples)
        return iter(mine)

    def __len__(self):
        return self.num_samples
