# Type stubs of the nnfleet package (python/nnfleet/__init__.py; docstrings there).
import os
from typing import Any, Callable, Iterator, Mapping, Sequence, Union

import numpy as np

__version__: str

class Error(Exception): ...
class PlanError(Error): ...
class DataError(Error): ...
class ModelError(Error): ...
class FileError(Error): ...
class UsageError(Error): ...

ArrayLike = Union[np.ndarray, Sequence[Any]]
Arrays = Union[ArrayLike, Sequence[ArrayLike]]
PathLike = Union[str, os.PathLike[str]]
Shape = tuple[int | None, ...]

class Model:
    @property
    def path(self) -> str: ...
    @property
    def input_shape(self) -> Shape | list[Shape]: ...
    @property
    def output_shape(self) -> Shape | list[Shape]: ...
    @property
    def input_names(self) -> list[str]: ...
    @property
    def output_names(self) -> list[str]: ...
    def count_params(self) -> int: ...
    def summary(self, print_fn: Callable[[str], Any] | None = ...) -> str: ...
    def predict(self, x: Arrays, *, y: Arrays | None = ..., loss: str | None = ...,
                batch_size: int = ..., workers: int | None = ...,
                scale: float | None = ...) -> tuple[Any, Any]: ...
    def evaluate(self, x: Arrays, y: Arrays, *, loss: str | None = ...,
                 metrics: Sequence[str] | str | None = ..., batch_size: int = ...,
                 workers: int | None = ..., scale: float | None = ...) -> dict[str, float]: ...
    def save(self, path: PathLike) -> None: ...

class ModelResult:
    name: str
    status: str
    message: str
    metrics: dict[str, float]
    history: dict[str, list[float]]
    epoch: list[int]
    best: dict[str, Any] | None
    epochs: int
    params: int
    seconds: float
    model_file: str | None
    model: Model | None

class Run:
    results: list[ModelResult]
    out: str
    interrupted: bool
    write_error: str
    makespan: float
    workers: int
    exit_code: int
    def __iter__(self) -> Iterator[ModelResult]: ...
    def __len__(self) -> int: ...
    def __getitem__(self, key: str | int) -> ModelResult: ...
    def keys(self) -> list[str]: ...

def load_model(path: PathLike, weights: PathLike | None = ..., *,
               input_shape: Sequence[int] | Sequence[Sequence[int]] | None = ...) -> Model: ...
def predict(model: Model | PathLike, x: Arrays, *, y: Arrays | None = ..., loss: str | None = ...,
            batch_size: int = ..., workers: int | None = ...,
            scale: float | None = ...) -> tuple[Any, Any]: ...
def evaluate(model: Model | PathLike, x: Arrays, y: Arrays, *, loss: str | None = ...,
             metrics: Sequence[str] | str | None = ..., batch_size: int = ...,
             workers: int | None = ...,
             scale: float | None = ...) -> dict[str, float]: ...
def train(models: Any, x: Arrays, y: Arrays, *, validation_split: float | None = ...,
          validation_data: Any = ..., test_data: tuple[Arrays, Arrays] | None = ...,
          epochs: int | None = ..., batch_size: int | None = ..., loss: Any = ...,
          optimizer: Any = ..., metrics: Sequence[str] | None = ..., early_stopping: Any = ...,
          seed: int = ..., workers: int | None = ..., out: PathLike | None = ...,
          resume: bool = ..., progress: bool | str = ...,
          on_epoch_end: Callable[[str, int, dict[str, float]], Any] | None = ...,
          checkpoint_seconds: float = ..., format: str = ..., scale: float | None = ...,
          **plan_defaults: Any) -> Run: ...
def stop() -> None: ...
def train_plan(path: PathLike, *, workers: int | None = ..., out: PathLike | None = ...,
               resume: bool = ..., checkpoint_seconds: float = ..., format: str = ...,
               progress: bool | str = ...,
               on_epoch_end: Callable[[str, int, dict[str, float]], Any] | None = ...) -> Run: ...

class datasets:
    @staticmethod
    def fashion_mnist(split: str = ...) -> tuple[np.ndarray, np.ndarray]: ...
