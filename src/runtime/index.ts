export * from './accelerator.js';
export * from './device.js';
export * from './registry.js';
export * from './event.js';
export * from './guard.js';
export { sizeClass, CachingAllocator } from './caching-allocator.js';
import './probes.js';
export { prepareWebgpu } from './webgpu/open.js';
