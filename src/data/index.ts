/** `kiln.data` (torch.utils.data): datasets, the default collate and the DataLoader. */
export { type Dataset, TensorDataset } from './dataset.js';
export { defaultCollate, type Collated } from './collate.js';
export { DataLoader, type DataLoaderOptions } from './dataloader.js';
