"""A word-level corpus: a Dictionary of the words seen and the train/valid/test files of a
directory as 1-D int64 tensors of word ids, one ``<eos>`` at the end of every line."""
import os

import torch


class Dictionary(object):
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus(object):
    def __init__(self, path):
        self.dictionary = Dictionary()
        self.train = self.tokenize(os.path.join(path, 'train.txt'))
        self.valid = self.tokenize(os.path.join(path, 'valid.txt'))
        self.test = self.tokenize(os.path.join(path, 'test.txt'))

    def tokenize(self, path):
        """Tokenizes a text file into a tensor of word ids."""
        assert os.path.exists(path), path
        # Add words to the dictionary
        with open(path, 'r', encoding="utf8") as f:
            for line in f:
                for word in line.split() + ['<eos>']:
                    self.dictionary.add_word(word)

        # Tokenize file content
        with open(path, 'r', encoding="utf8") as f:
            idss = []
            for line in f:
                ids = [self.dictionary.word2idx[word] for word in line.split() + ['<eos>']]
                idss.append(torch.tensor(ids).type(torch.int64))
            ids = torch.cat(idss)

        return ids
