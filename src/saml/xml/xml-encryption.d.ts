// xml-encryption ships no type declarations; these cover the two functions the layer calls.
declare module 'xml-encryption' {
  type Callback = (err: Error | null, result?: string) => void;
  const xmlenc: {
    encrypt(this: void, content: string, options: object, callback: Callback): void;
    decrypt(this: void, xml: string, options: object, callback: Callback): void;
  };
  export default xmlenc;
}
