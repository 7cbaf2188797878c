"""String inputs: a model starting with TextVectorization trains on a list of str and predicts
from a list or a NumPy unicode array (issue 35)."""
import numpy as np

import nnfleet

CATS = ["The cat sat.", "A CAT, purring!", "cats and a cat", "my cat sleeps"]
DOGS = ["The dog barked.", "A DOG, running!", "dogs and a dog", "my dog eats"]


def test_text_model_trains_on_a_list_of_str_and_predicts_from_str():
    texts = [CATS[i % 4] if i % 2 else DOGS[i % 4] for i in range(32)]
    y = np.array([i % 2 for i in range(32)], dtype=np.int32)
    model = {"name": "text", "layers": [
        {"TextVectorization": {"output_sequence_length": 6}},
        {"Embedding": {"input_dim": 16, "output_dim": 4}},
        {"GlobalAveragePooling1D": {}},
        {"Dense": {"units": 1, "activation": "sigmoid"}}]}
    run = nnfleet.train([model], texts, y, epochs=30, batch_size=8, seed=3, workers=1,
                        loss="binary_crossentropy", optimizer={"Adam": {"learning_rate": 0.05}},
                        progress=False)
    assert run["text"].status == "done"
    m = run["text"].model
    from_list = m.predict(["the cat sat", "the dog barked"])
    from_array = m.predict(np.array(["the cat sat", "the dog barked"]))
    assert np.array_equal(from_list, from_array)
    assert from_list[0, 0] > 0.5 > from_list[1, 0]


def test_string_lookup_and_hashing_train_on_words_from_python():
    words = [("cat", "kitten", "tabby")[i % 3] if i % 2 else ("dog", "puppy", "hound")[i % 3]
             for i in range(48)]
    y = np.array([i % 2 for i in range(48)], dtype=np.int32)
    models = [{"name": name, "layers": [front, {"Dense": {"units": 1, "activation": "sigmoid"}}]}
              for name, front in (("lookup", {"StringLookup": {"output_mode": "one_hot"}}),
                                  ("hashing", {"Hashing": {"num_bins": 64,
                                                           "output_mode": "one_hot"}}))]
    run = nnfleet.train(models, words, y, epochs=40, batch_size=8, seed=3, workers=1,
                        loss="binary_crossentropy", optimizer={"Adam": {"learning_rate": 0.05}},
                        progress=False)
    p = run["lookup"].model.predict(np.array(["tabby", "hound"]))
    assert p[0, 0] > 0.5 > p[1, 0]
    assert run["hashing"].status == "done"
    assert run["hashing"].model.predict(["cat"]).shape == (1, 1)
