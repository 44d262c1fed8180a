import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './App.tsx';
import { checkGpu } from './gpu-check.ts';
import { snapshot } from './store.ts';
import './styles.css';

declare global {
  interface Window {
    /** Read-only debug API for tests and the curious. */
    shoal: { getState: typeof snapshot };
  }
}
window.shoal = Object.freeze({ getState: snapshot });

const root = document.getElementById('root');
if (!root) throw new Error('index.html has no #root element');
createRoot(root).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
void checkGpu();
