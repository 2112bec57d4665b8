// What reading metadata refuses: a 400 whose message says what is wrong with the document, never
// quoting more of it than an entityID or a URL the operator gave.
import { AppError } from '../../errors.ts';

export class MetadataError extends AppError {
  constructor(message: string) {
    super(400, message);
  }
}

export const refuseMetadata = (message: string): MetadataError => new MetadataError(message);
