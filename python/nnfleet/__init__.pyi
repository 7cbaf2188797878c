# Type stubs of the nnfleet package (python/nnfleet/__init__.py; docstrings there).
import builtins
import os
from typing import Any, Callable, Iterator, Mapping, Sequence, Union, overload

import numpy as np

__version__: str
STOP_MODEL: str

class Error(Exception): ...
class PlanError(Error): ...
class DataError(Error): ...
class ModelError(Error): ...
class FileError(Error): ...
class UsageError(Error): ...

ArrayLike = Union[np.ndarray, Sequence[Any]]
# One array, or several inputs (outputs) as Keras takes them: by name, or a list in the model's order.
Arrays = Union[ArrayLike, Sequence[ArrayLike], Mapping[str, ArrayLike]]
# (x, y) or (x, y, sample_weight)
XY = Union[tuple[Arrays, Arrays], tuple[Arrays, Arrays, ArrayLike]]
Predictions = Union[np.ndarray, list[np.ndarray]]
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
    @overload
    def predict(self, x: Arrays, *, y: None = ..., loss: str | None = ...,
                batch_size: int = ..., workers: int | None = ...,
                scale: float | None = ...) -> Predictions: ...
    @overload
    def predict(self, x: Arrays, *, y: Arrays, loss: str | None = ...,
                batch_size: int = ..., workers: int | None = ...,
                scale: float | None = ...) -> tuple[Predictions, Predictions]: ...
    def evaluate(self, x: Arrays, y: Arrays, *, loss: str | None = ...,
                 metrics: Sequence[str] | str | None = ..., batch_size: int = ...,
                 workers: int | None = ..., scale: float | None = ...) -> dict[str, float]: ...
    def save(self, path: PathLike) -> None: ...

class ModelResult:
    name: str
    status: str
    message: str
    metrics: dict[str, float]
    last_metrics: dict[str, float]
    history: dict[str, list[float]]
    epoch: list[int]
    best: dict[str, Any] | None
    epochs: int
    params: int
    seconds: float
    model_file: str | None
    epoch_seconds: list[float]
    @property
    def model(self) -> Model | None: ...  # read from model_file when first asked for
    parameters: dict[str, Any]
    rungs: list[tuple[int, float, str]]

class Run:
    results: list[ModelResult]
    out: str
    folder: str
    interrupted: bool
    write_error: str
    makespan: float
    workers: int
    exit_code: int
    rank_by: str
    higher_is_better: bool
    ranking: list[int]
    group_by: str | None
    report_path: str
    report_error: str
    @property
    def best(self) -> ModelResult | None: ...
    def __iter__(self) -> Iterator[ModelResult]: ...
    def __len__(self) -> int: ...
    def __getitem__(self, key: str | int) -> ModelResult: ...
    def keys(self) -> list[str]: ...
    def ranks(self, group_by: str | None = ...) -> list[int]: ...
    def rows(self, group_by: str | None = ...) -> list[dict[str, Any]]: ...
    def frame(self, group_by: str | None = ...) -> Any: ...  # a pandas DataFrame
    def history_rows(self) -> list[dict[str, Any]]: ...
    def history_frame(self) -> Any: ...  # a pandas DataFrame
    def report(self, path: PathLike | None = ...) -> str: ...
    def _repr_html_(self) -> str: ...

class Trial:
    number: int
    def __init__(self, number: int, seed: int = ..., sampler: str = ...) -> None: ...
    @property
    def params(self) -> dict[str, Any]: ...
    def uniform(self, name: str, lo: float, hi: float) -> float: ...
    def loguniform(self, name: str, lo: float, hi: float) -> float: ...
    def int(self, name: str, lo: builtins.int, hi: builtins.int, step: builtins.int = ...,
            log: bool = ...) -> builtins.int: ...  # named as Keras Tuner's and Optuna's
    def choice(self, name: str, values: Sequence[Any]) -> Any: ...
    def fixed(self, name: str, value: Any) -> Any: ...

class SearchRun(Run):
    metric: str
    higher_is_better: bool
    @property
    def best(self) -> ModelResult | None: ...
    @property
    def trials(self) -> list[dict[str, Any]]: ...
    def trials_frame(self) -> Any: ...

def load_model(path: PathLike, weights: PathLike | None = ..., *,
               input_shape: Sequence[int] | Sequence[Sequence[int]] | None = ...) -> Model: ...
@overload
def predict(model: Model | PathLike, x: Arrays, *, y: None = ..., loss: str | None = ...,
            batch_size: int = ..., workers: int | None = ...,
            scale: float | None = ...) -> Predictions: ...
@overload
def predict(model: Model | PathLike, x: Arrays, *, y: Arrays, loss: str | None = ...,
            batch_size: int = ..., workers: int | None = ...,
            scale: float | None = ...) -> tuple[Predictions, Predictions]: ...
def evaluate(model: Model | PathLike, x: Arrays, y: Arrays, *, loss: str | None = ...,
             metrics: Sequence[str] | str | None = ..., batch_size: int = ...,
             workers: int | None = ...,
             scale: float | None = ...) -> dict[str, float]: ...
def train(models: Any, x: Arrays | None = ..., y: Arrays | None = ..., *,
          validation_split: float | None = ..., validation_data: XY | None = ...,
          test_data: XY | None = ..., sample_weight: ArrayLike | None = ...,
          data: Mapping[str | int, XY | Mapping[str, Any]] | None = ..., data_key: str = ...,
          epochs: int | None = ..., batch_size: int | None = ..., loss: Any = ...,
          optimizer: Any = ..., metrics: Sequence[str] | None = ..., early_stopping: Any = ...,
          seed: int = ..., workers: int | None = ..., out: PathLike | None = ...,
          resume: bool = ..., verbose: int | str = ..., progress: bool | str | None = ...,
          on_epoch_end: Callable[[str, int, dict[str, float]], Any] | None = ...,
          checkpoint_seconds: float = ..., format: str = ..., scale: float | None = ...,
          report: bool = ..., group_by: str | None = ..., save: str | None = ...,
          **plan_defaults: Any) -> Run: ...
def search(space_or_build: Mapping[str, Any] | Callable[[Trial], dict[str, Any]], x: Arrays,
           y: Arrays, *, model: dict[str, Any] | Sequence[dict[str, Any]] | None = ...,
           trials: int | None = ..., scheduler: str = ..., reduction_factor: int = ...,
           min_epochs: int = ..., max_epochs: int | None = ..., brackets: int = ...,
           interval: int = ..., metric: str = ..., mode: str = ..., sampler: str = ...,
           max_total_epochs: int | None = ..., time_limit: float | None = ...,
           validation_split: float | None = ..., validation_data: XY | None = ...,
           test_data: XY | None = ..., sample_weight: ArrayLike | None = ...,
           batch_size: int | None = ...,
           loss: Any = ..., optimizer: Any = ..., metrics: Sequence[str] | None = ...,
           early_stopping: Any = ..., seed: int = ..., workers: int | None = ...,
           out: PathLike | None = ..., resume: bool = ..., verbose: int | str = ...,
           progress: bool | str | None = ...,
           on_epoch_end: Callable[[str, int, dict[str, float]], Any] | None = ...,
           checkpoint_seconds: float = ..., format: str = ..., scale: float | None = ...,
           report: bool = ..., group_by: str | None = ...,
           **plan_defaults: Any) -> SearchRun: ...
def stop() -> None: ...
def train_plan(path: PathLike, *, workers: int | None = ..., out: PathLike | None = ...,
               resume: bool = ..., checkpoint_seconds: float = ..., format: str = ...,
               verbose: int | str = ..., progress: bool | str | None = ...,
               on_epoch_end: Callable[[str, int, dict[str, float]], Any] | None = ...,
               report: bool = ..., group_by: str | None = ..., save: str | None = ...) -> Run: ...

class datasets:
    @staticmethod
    def fashion_mnist(split: str = ...) -> tuple[np.ndarray, np.ndarray]: ...
