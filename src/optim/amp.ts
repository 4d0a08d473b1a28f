/**
 * `kiln.amp` (torch.amp): automatic mixed precision. `autocast` / `autocastScope` run matrix
 * products and convolutions in bfloat16 or float16 with float32 master weights (src/api/autocast.ts);
 * `GradScaler` scales the loss so float16 gradients do not underflow (grad-scaler.ts).
 */
export { autocast, autocastScope, autocastDtype, AUTOCAST_FLOAT32, AUTOCAST_LOWER, type AutocastDtype } from '../api/autocast.js';
export { GradScaler, type GradScalerOptions, type GradScalerState } from './grad-scaler.js';
