"""What a checkpoint holds beside Lightning's own state (weights, optimiser, loops): the
algorithm and its net's spec, the game counters, each process's random stream and games,
the opponent's training state, a population's members (games, activity, why each stopped)
and, under ``trainer=ddp``, every process's share of the members. Written on every process
(Lightning saves from rank 0), read back on resume. A part of ``RLModule`` (``train/module.py``).
"""

from __future__ import annotations

import torch

from ttt_research.errors import ConfigError


class CheckpointState:
    """``RLModule``'s part that saves and restores the shell's state in a checkpoint."""

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        # Called on every process (Lightning writes the file from rank 0): gather what
        # differs between processes, i.e. each one's random stream and game count.
        checkpoint["net_spec"] = self.algo.net.spec()
        checkpoint["algo"] = self.name
        if self.on_board:  # another board, named (checkpoint_file.checkpoint_game); tic-tac-toe's as ever
            checkpoint["game"] = self.game.name
        if not self.members:  # a single run's policy as trained (a population's differ per member)
            checkpoint["acting"] = self.algo.acting(self).to_meta()
        checkpoint["games_played"] = self.games_played
        checkpoint["env_steps"] = self.env_steps
        checkpoint["games_by_process"] = [int(g) for g in self._per_process(
            torch.tensor(self.games_local, dtype=torch.int64))]
        checkpoint["opponent_state"] = self.opponent.state()
        population = None
        if self.members:
            population = {"member_games": self.member_games.clone(), "active": self.active.clone(),
                          "stopped": {str(k): v for k, v in self.stopped.items()}}
            checkpoint["population"] = population
        if self.split:
            # Each process holds other members: the file keeps every process's share (rank
            # 0's is also Lightning's own state_dict), and a resumed process takes its own.
            checkpoint["member_shards"] = self.gather_objects({
                "state_dict": {k: v.detach().cpu() for k, v in self.state_dict().items()},
                "optimizer": self.trainer.optimizers[0].state_dict(),
                "generator": self.streams.get_state() if self.streams is not None else None,
                "population": population, "opponent_state": self.opponent.state()})
            checkpoint["generator_states"] = [s["generator"] for s in checkpoint["member_shards"]]
        elif self.streams is not None:
            checkpoint["generator_states"] = self._per_process(self.streams.get_state())

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.games_played = int(checkpoint.get("games_played", 0))
        self.env_steps = int(checkpoint.get("env_steps", 0))
        by_process = checkpoint.get("games_by_process", [self.games_played])
        self._stream_states = checkpoint.get("generator_states")
        if self._stream_states is None and "generator_state" in checkpoint:  # older files
            self._stream_states = [checkpoint["generator_state"]]
        rank = self.global_rank
        self.games_local = int(by_process[rank]) if rank < len(by_process) else 0
        shards = checkpoint.get("member_shards")
        if shards is not None or self.split:
            world = self.trainer.world_size
            if shards is None or len(shards) != world:
                raise ConfigError(f"this checkpoint holds a population trained by "
                                  f"{len(shards) if shards else 1} process(es); resume it with as many "
                                  f"(trainer.devices), not {world}")
            mine = shards[rank]  # Lightning restores the state and optimiser read here
            checkpoint["state_dict"] = mine["state_dict"]
            checkpoint["optimizer_states"] = [mine["optimizer"]]
            checkpoint["opponent_state"] = mine["opponent_state"]
            checkpoint["population"] = mine["population"]
        self.opponent.restore(checkpoint.get("opponent_state", {}), self.net)
        pop = checkpoint.get("population")
        if pop is not None:
            self.member_games = pop["member_games"].clone()
            self.active = pop["active"].clone()
            self.stopped = {int(k): v for k, v in pop["stopped"].items()}
